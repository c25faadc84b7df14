mod args;
mod broker;
mod catalogue;
mod reply;
mod socket;
mod tidy;
