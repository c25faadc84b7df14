mod broker;
mod garbage;
mod socket;
mod tidy;
