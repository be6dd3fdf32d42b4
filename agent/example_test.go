package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/sas-go/sas/agent"
)

// Reservation is what the flights service answers.
type Reservation struct {
	ID     string `json:"id"`
	Flight string `json:"flight"`
}

// A step is a Go function; an agent serves its steps by name. Run puts a
// request through the agent as the Lambda handler does, without queues.
func Example() {
	reserve := func(ctx context.Context, req agent.Request) (any, error) {
		var p struct {
			Flight string `json:"flight"`
			Seats  int    `json:"seats"`
		}
		if err := req.DecodePayload(&p); err != nil {
			return nil, err // permanent: the payload will not get better
		}
		if p.Seats > 9 {
			return nil, agent.Permanent(fmt.Errorf("flight %s: at most 9 seats per booking, asked %d", p.Flight, p.Seats))
		}
		// ... call the airline with req.IdempotencyKey ...
		return Reservation{ID: "R-" + req.IdempotencyKey, Flight: p.Flight}, nil
	}
	cancel := func(ctx context.Context, req agent.Request) (any, error) {
		// ... cancel the reservation made under the step's key ...
		return nil, nil
	}
	flights := agent.New("flights").Step("reserve-flight", reserve, cancel)

	ctx := context.Background()
	out := flights.Run(ctx, agent.Request{
		OrderID: "o-1", Step: "reserve-flight", IdempotencyKey: "o-1:0",
		Payload: json.RawMessage(`{"flight":"FL123","seats":2}`),
	})
	fmt.Println(out.Status, string(out.Result))

	out = flights.Run(ctx, agent.Request{
		OrderID: "o-2", Step: "reserve-flight", IdempotencyKey: "o-2:0",
		Payload: json.RawMessage(`{"flight":"FL123","seats":12}`),
	})
	fmt.Println(out.Status, out.Reason)

	out = flights.Run(ctx, agent.Request{OrderID: "o-1", Step: "reserve-flight", IdempotencyKey: "o-1:0:undo", Undo: true})
	fmt.Println("undo:", out.Status)
	// Output:
	// done {"id":"R-o-1:0","flight":"FL123"}
	// failed flight FL123: at most 9 seats per booking, asked 12
	// undo: done
}

// A service that says "not now" is waited for: in the process when the
// step's deadline allows, else by redelivery after the time it asked.
func ExampleRetryAfter() {
	calls := 0
	quota := agent.New("quotes").Step("quote", func(ctx context.Context, req agent.Request) (any, error) {
		calls++
		return nil, agent.RetryAfter(time.Hour, errors.New("daily quota reached"))
	}, nil)

	out := quota.Run(context.Background(), agent.Request{OrderID: "o-1", Step: "quote", Deadline: time.Now().Add(30 * time.Second)})
	fmt.Printf("status %q, comes back in %s, after %d call\n", out.Status, out.RetryAfter, calls)
	// Output: status "transient", comes back in 1h0m0s, after 1 call
}

// Transient errors are tried again in the process, with a jittered
// backoff, up to Tries runs per attempt.
func ExampleTries() {
	calls := 0
	flaky := agent.New("flaky", agent.Tries(4), agent.Backoff(time.Millisecond, 10*time.Millisecond)).
		Step("ping", func(ctx context.Context, req agent.Request) (any, error) {
			if calls++; calls < 3 {
				return nil, errors.New("connection reset")
			}
			return "pong", nil
		}, nil)
	out := flaky.Run(context.Background(), agent.Request{OrderID: "o-1", Step: "ping"})
	fmt.Println(out.Status, string(out.Result), "after", calls, "calls")
	// Output: done "pong" after 3 calls
}

// An HTTP agent calls the request's action against its service, with the
// payload, the order and the step as the body and the step's idempotency
// key as a header.
func ExampleHTTP() {
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Println(r.Method, r.URL.Path, r.Header.Get("Idempotency-Key"), string(body))
		_, _ = io.WriteString(w, `{"status":"captured"}`)
	}))
	defer svc.Close()

	client, err := agent.NewHTTPClient(agent.HTTPConfig{})
	if err != nil {
		log.Fatal(err)
	}
	payments := agent.HTTP("payments", svc.URL, client)
	out := payments.Run(context.Background(), agent.Request{
		OrderID: "o-1", Step: "charge", StepIndex: 1, IdempotencyKey: "o-1:1",
		Action: "POST /payments", Payload: json.RawMessage(`{"amount":1250,"currency":"EUR"}`),
	})
	fmt.Println(out.Status, string(out.Result))
	// Output:
	// POST /payments o-1:1 {"amount":1250,"currency":"EUR","orderId":"o-1","step":"charge"}
	// done {"status":"captured"}
}

// A step calls its services through one shared HTTPClient: retries,
// deadline and circuit breaker come with it, and its errors are already
// classified.
func ExampleHTTPClient_Do() {
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = io.WriteString(w, `{"error":"card declined"}`)
	}))
	defer svc.Close()
	client, err := agent.NewHTTPClient(agent.HTTPConfig{})
	if err != nil {
		log.Fatal(err)
	}

	charge := func(ctx context.Context, req agent.Request) (any, error) {
		res, err := client.Do(ctx, agent.HTTPCall{
			Endpoint: svc.URL, Method: http.MethodPost, Path: "/charges",
			Body: req.Payload, IdempotencyKey: req.IdempotencyKey,
		})
		if err != nil {
			return nil, fmt.Errorf("charging order %s: %w", req.OrderID, err)
		}
		return json.RawMessage(res.Body), nil
	}
	out := agent.New("billing").Step("charge", charge, nil).
		Run(context.Background(), agent.Request{OrderID: "o-1", Step: "charge", IdempotencyKey: "o-1:1", Payload: json.RawMessage(`{}`)})
	fmt.Println(out.Status)
	fmt.Println(strings.ReplaceAll(out.Reason, svc.URL, "http://billing.example"))
	// Output:
	// failed
	// charging order o-1: calling POST http://billing.example/charges: permanent failure: HTTP 402 Payment Required: {"error":"card declined"}
}

// A Lambda function's main: the agents it serves, and Start. The
// environment says where the replies go (SAS_SCHEDULER_QUEUE_URL) and which
// queues the function takes requests from (SAS_AGENT_QUEUE_URL,
// SAS_AGENT_PRIORITY_QUEUE_URL). Not run here: it needs Lambda.
func ExampleStart() {
	reserve := func(ctx context.Context, req agent.Request) (any, error) { return nil, nil }
	cancel := func(ctx context.Context, req agent.Request) (any, error) { return nil, nil }
	flights := agent.New("flights").Step("reserve-flight", reserve, cancel)

	log.Fatal(agent.Start(flights))
}
