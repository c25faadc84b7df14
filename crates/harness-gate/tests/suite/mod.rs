mod cases;
mod fuzz;
mod props;
mod tree;
