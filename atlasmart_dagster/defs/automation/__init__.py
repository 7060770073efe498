"""Jobs, schedules and sensors: what starts work and what follows it up."""
