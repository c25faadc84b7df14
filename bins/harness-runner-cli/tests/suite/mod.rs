mod exits;
mod fixture;
mod git_tools;
mod real_sessions;
mod s0_lines;
mod turns;
