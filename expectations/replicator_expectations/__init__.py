"""Great Expectations suites over the verification tables (see `report`)."""
