mod contract;
mod real_clis;
