package sas

import "strings"

// QueueName is the name of a queue given its URL (…/account/name) or ARN
// (arn:aws:sqs:region:account:name): the part every emulator and SQS agree
// on, and what matches a message's EventSourceARN to the queue it came from.
// A trailing slash is ignored; a string without either separator is taken
// as a name.
func QueueName(urlOrARN string) string {
	s := strings.TrimRight(urlOrARN, "/")
	return s[strings.LastIndexAny(s, "/:")+1:]
}

// LocalQueueARN is the ARN a local run gives the queue at queueURL (account
// 000000000000), as the EventSourceARN of the events it builds. Only the
// name is ever read back (QueueName); region is for the logs.
func LocalQueueARN(region, queueURL string) string {
	return "arn:aws:sqs:" + region + ":000000000000:" + QueueName(queueURL)
}
