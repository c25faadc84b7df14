mod cli;
mod garbage;
mod protocol;
mod real_claude;
mod session;
