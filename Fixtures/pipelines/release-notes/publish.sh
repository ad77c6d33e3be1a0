#!/bin/sh
# Input: {"lint": {...}, "notes": "...", "version": "..."}. Output: the draft to publish.
input=$(cat)
version=$(printf '%s' "$input" | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
printf '{"draft":true,"title":"Release %s","body":%s}\n' "$version" "$input"
