mod args;
mod catalogue;
mod reply;
mod tidy;
