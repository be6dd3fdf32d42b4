"""The Runtime API as a bootstrap sees it (stdlib only: runs without LocalStack).

Run: PYTHONPATH=. python3 tests/test_runtime_api.py (from process-executor/);
`go test ./localstack` runs it.
"""

import http.client
import json
import threading
import unittest

from sas_localstack_lambda.runtime_api import Event, RuntimeAPI


class RuntimeAPITest(unittest.TestCase):
    def setUp(self):
        self.api = RuntimeAPI("test")
        self.api.start()
        self.addCleanup(self.api.stop)
        host, port = self.api.address.split(":")
        self.conn = lambda: http.client.HTTPConnection(host, int(port), timeout=5)

    def next_event(self, conn):
        conn.request("GET", "/2018-06-01/runtime/invocation/next")
        r = conn.getresponse()
        return r, r.read()

    def test_event_and_chunked_response(self):
        fut = self.api.submit(Event("req-1", b'{"a":1}', "arn:aws:lambda:us-east-1:000000000000:function:f", 1234, "Root=1"))
        c = self.conn()
        r, body = self.next_event(c)
        self.assertTrue(self.api.ready.is_set())
        self.assertEqual(r.status, 200)
        self.assertEqual(body, b'{"a":1}')
        self.assertEqual(r.getheader("Lambda-Runtime-Aws-Request-Id"), "req-1")
        self.assertEqual(r.getheader("Lambda-Runtime-Deadline-Ms"), "1234")
        self.assertEqual(r.getheader("Lambda-Runtime-Invoked-Function-Arn"), "arn:aws:lambda:us-east-1:000000000000:function:f")
        self.assertEqual(r.getheader("Lambda-Runtime-Trace-Id"), "Root=1")
        # aws-lambda-go streams its answer: chunked, on the same connection.
        c.request("POST", "/2018-06-01/runtime/invocation/req-1/response", body=iter([b'{"ok":', b"true}"]),
                  encode_chunked=True, headers={"Transfer-Encoding": "chunked"})
        r = c.getresponse()
        r.read()
        self.assertEqual(r.status, 202)
        out = fut.result(timeout=5)
        self.assertFalse(out.is_error)
        self.assertEqual(out.payload, b'{"ok":true}')
        # The connection still works: the next request parses.
        fut2 = self.api.submit(Event("req-2", b"{}", "arn", 1))
        r, _ = self.next_event(c)
        self.assertEqual(r.getheader("Lambda-Runtime-Aws-Request-Id"), "req-2")
        err = json.dumps({"errorType": "boom", "errorMessage": "no"}).encode()
        c.request("POST", "/2018-06-01/runtime/invocation/req-2/error", body=err)
        r = c.getresponse()
        r.read()
        self.assertEqual(r.status, 202)
        out = fut2.result(timeout=5)
        self.assertTrue(out.is_error)
        self.assertEqual(json.loads(out.payload)["errorType"], "boom")

    def test_answer_to_unknown_request_is_refused(self):
        c = self.conn()
        c.request("POST", "/2018-06-01/runtime/invocation/nobody/response", body=b"{}")
        r = c.getresponse()
        r.read()
        self.assertEqual(r.status, 400)

    def test_init_error(self):
        c = self.conn()
        c.request("POST", "/2018-06-01/runtime/init/error", body=b'{"errorType":"x"}')
        r = c.getresponse()
        r.read()
        self.assertEqual(r.status, 202)
        self.assertEqual(self.api.init_error, b'{"errorType":"x"}')

    def test_stop_releases_a_waiting_bootstrap(self):
        got = {}

        def wait():
            try:
                r, _ = self.next_event(self.conn())
                got["status"] = r.status
            except OSError as e:
                got["error"] = e

        t = threading.Thread(target=wait)
        t.start()
        self.assertTrue(self.api.ready.wait(5))
        self.api.stop()
        t.join(5)
        self.assertFalse(t.is_alive())


if __name__ == "__main__":
    unittest.main()
