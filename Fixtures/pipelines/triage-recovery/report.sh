#!/bin/sh
# Input: {"classes": {...}, "enrichment": {...}}. Output: the report.
input=$(cat)
printf '{"report":%s}\n' "$input"
