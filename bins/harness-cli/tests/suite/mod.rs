mod bundle;
mod garbage;
mod real_claude_bundle;
mod unslop;
