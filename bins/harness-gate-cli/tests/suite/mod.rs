mod contract;
