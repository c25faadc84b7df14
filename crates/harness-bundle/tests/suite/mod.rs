mod disk_full;
mod env;
mod props;
mod refusals;
mod routes;
mod seal;
mod snapshots;
mod tidy;
