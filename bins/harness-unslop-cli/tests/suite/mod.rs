mod contract;
mod garbage;
mod real_clis;
