mod args;
mod broker;
mod catalogue;
mod garbage;
mod reply;
mod socket;
mod tidy;
