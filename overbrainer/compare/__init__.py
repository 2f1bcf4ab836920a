"""`compare`: the child (served on its run's target) against its parent, judged locally."""
