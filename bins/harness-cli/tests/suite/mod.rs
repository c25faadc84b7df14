mod bundle;
mod cli;
mod garbage;
mod real_claude_bundle;
mod unslop;
