mod exits;
mod fixture;
mod turns;
