mod bundle;
mod cli;
mod doctor;
mod garbage;
mod real_claude_bundle;
mod unslop;
