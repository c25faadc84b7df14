mod disk_full;
mod env;
mod props;
mod refusals;
mod routes;
mod snapshots;
mod tidy;
