"""`python -m agent_eval ARGS` runs `agent-eval ARGS`."""

import sys

from agent_eval import main

sys.exit(main())
