#!/bin/sh
# The rules service is down: every attempt fails.
cat > /dev/null
echo "rules service unavailable (503)" >&2
exit 1
