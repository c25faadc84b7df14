mod exits;
mod fixture;
mod real_sessions;
mod turns;
