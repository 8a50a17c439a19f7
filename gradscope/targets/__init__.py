"""TARGET → Target."""
