mod cli;
mod contract;
mod garbage;
mod real_clis;
mod search_files;
