// Command scheduler is the scheduler Lambda function. It is a placeholder until the
// pipeline issue lands: it exits with an error rather than pretending to work.
package main

import "log"

func main() { log.Fatal("scheduler: not built yet (see the pipeline issue)") }
