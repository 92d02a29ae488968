# A regular package so that the wheel ships this folder as the bundle package named in pyproject.toml
# (package-dir), and an editable install imports it too. It defines no workflow: the scheduler's safe-mode
# scan skips this file.
