"""Planning on top of the physics: estimates, the layout search, cluster sizing, the manager's plan and vendor choice."""
