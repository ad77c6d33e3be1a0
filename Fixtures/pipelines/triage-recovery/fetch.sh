#!/bin/sh
# Input: {"tickets": [...]}. Output: the same tickets, as fetched.
cat
