"""What others published, read in: DLPerf-style log folders (``dlperf import``) and MLPerf Training submissions, and a figure beside the field's record."""
