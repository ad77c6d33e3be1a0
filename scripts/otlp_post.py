#!/usr/bin/env python3
"""Sends OTLP/HTTP requests to a receiver the way a misbehaving or heavy exporter would, for
agent-eval collect's tests. Standard library only.

    otlp_post.py URL --zeros N [--content-type T]   a body of N zero bytes, streamed (Content-Length N)
    otlp_post.py URL --gzip-bomb N                   gzip of N zero bytes (Content-Encoding: gzip)
    otlp_post.py URL --body-file F [--content-type T] [--method M]
    otlp_post.py URL --flood N                       N small OTLP/JSON requests, one span of a new trace each,
                                                     over one keep-alive connection
    otlp_post.py URL --together N --size S           N OTLP/JSON requests of about S bytes each, held open at
                                                     once: the first half of every body is sent before any
                                                     second half

Prints one JSON line per answer: {"status": N, "content_type": "...", "body": "..."} (the body
as text, protobuf bodies as hex); with --flood, one line {"statuses": {"200": N, ...}}.
"""
import argparse
import gzip
import http.client
import json
import sys
import urllib.parse


def answer(response):
    body = response.read()
    kind = response.getheader("content-type") or ""
    text = body.hex() if "protobuf" in kind else body.decode("utf-8", "replace")
    return {"status": response.status, "content_type": kind, "body": text}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--zeros", type=int)
    parser.add_argument("--gzip-bomb", type=int)
    parser.add_argument("--body-file")
    parser.add_argument("--flood", type=int)
    parser.add_argument("--together", type=int)
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--content-type", default="application/x-protobuf")
    parser.add_argument("--method", default="POST")
    options = parser.parse_args()
    url = urllib.parse.urlsplit(options.url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    headers = {"content-type": options.content_type}
    if options.zeros is not None:
        connection.putrequest("POST", url.path)
        connection.putheader("content-type", options.content_type)
        connection.putheader("content-length", str(options.zeros))
        connection.endheaders()
        block = bytes(1 << 20)
        left = options.zeros
        try:
            while left > 0:
                connection.send(block[:min(left, len(block))])
                left -= min(left, len(block))
        except (BrokenPipeError, ConnectionResetError) as error:
            print(json.dumps({"status": 0, "content_type": "", "body": "connection closed while sending: %s" % error}))
            return
        print(json.dumps(answer(connection.getresponse())))
    elif options.gzip_bomb is not None:
        body = gzip.compress(bytes(options.gzip_bomb), compresslevel=9)
        connection.request("POST", url.path, body=body, headers=dict(headers, **{"content-encoding": "gzip"}))
        print(json.dumps(answer(connection.getresponse())))
    elif options.body_file is not None:
        with open(options.body_file, "rb") as file:
            body = file.read()
        connection.request(options.method, url.path, body=body, headers=headers)
        print(json.dumps(answer(connection.getresponse())))
    elif options.flood is not None:
        statuses = {}
        for number in range(options.flood):
            trace = "%032x" % (number + 1)
            request = {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "flood"}}]},
                                          "scopeSpans": [{"scope": {"name": "flood"}, "spans": [{
                                              "traceId": trace, "spanId": "%016x" % (number + 1), "name": "execute_tool ping",
                                              "startTimeUnixNano": "1790000000000000000", "endTimeUnixNano": "1790000000001000000",
                                              "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                                                             {"key": "gen_ai.tool.name", "value": {"stringValue": "ping"}}]}]}]}]}
            connection.request("POST", url.path, body=json.dumps(request), headers={"content-type": "application/json"})
            status = answer(connection.getresponse())["status"]
            statuses[str(status)] = statuses.get(str(status), 0) + 1
        print(json.dumps({"statuses": statuses}))
    elif options.together is not None:
        connections, bodies = [], []
        for number in range(options.together):
            trace = "%032x" % (0xA000 + number)
            padding = "x" * max(0, options.size - 400)
            request = {"resourceSpans": [{"scopeSpans": [{"spans": [{
                "traceId": trace, "spanId": "%016x" % (number + 1), "name": "execute_tool pad",
                "startTimeUnixNano": "1790000000000000000", "endTimeUnixNano": "1790000000001000000",
                "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                               {"key": "pad", "value": {"stringValue": padding}}]}]}]}]}
            body = json.dumps(request).encode()
            held = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
            held.putrequest("POST", url.path)
            held.putheader("content-type", "application/json")
            held.putheader("content-length", str(len(body)))
            held.endheaders()
            held.send(body[:len(body) // 2])
            connections.append(held)
            bodies.append(body)
        statuses = {}
        for held, body in zip(connections, bodies):
            held.send(body[len(body) // 2:])
        for held in connections:
            status = answer(held.getresponse())["status"]
            statuses[str(status)] = statuses.get(str(status), 0) + 1
        print(json.dumps({"statuses": statuses}))
    else:
        parser.error("give --zeros, --gzip-bomb, --body-file, --flood or --together")


if __name__ == "__main__":
    main()
