#!/bin/sh
# Input: {"release": {"version": ..., "changes": [...]}} on stdin. Output: the changes and their count.
input=$(cat)
changes=$(printf '%s' "$input" | sed -n 's/.*"changes":\(\[[^]]*\]\).*/\1/p')
count=$(printf '%s' "$changes" | tr -cd ',' | wc -c)
printf '{"changes":%s,"count":%d}\n' "$changes" $((count + 1))
