mod exits;
mod fixture;
mod real_sessions;
mod s0_lines;
mod turns;
