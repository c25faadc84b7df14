mod env;
mod props;
mod refusals;
mod routes;
mod snapshots;
mod tidy;
