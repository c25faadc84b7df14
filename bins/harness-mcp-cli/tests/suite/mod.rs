mod cli;
mod garbage;
mod logs;
mod protocol;
mod real_claude;
mod session;
