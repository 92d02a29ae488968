"""What to run: suites, the trigger form, the deployment's defaults, and the plan of case runs a trigger resolves to."""
