mod cases;
mod props;
mod tree;
