"""Test-only: installs the environment's faults (``fault_env.py`` here) as a process starts."""

import fault_env

fault_env.install_if_asked()
