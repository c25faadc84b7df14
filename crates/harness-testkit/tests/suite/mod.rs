mod deadline;
mod real_clis;
mod scripted_model;
