mod deadline;
mod real_clis;
mod scripted_broker;
mod scripted_model;
