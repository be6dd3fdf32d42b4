# failures.awk prints, from a `go test -v` log, what each failure wrote:
# every failing test's own lines (its t.Log, its output, its errors, gathered
# across the log's RUN/CONT/NAME switches), each panic up to its package's
# verdict, each build or vet error block, and the FAIL lines of the packages.
# `make test` runs it on .rig/test.log, so that a failure shows whatever its
# text, not only what matched a pattern.
#
#   awk -f scripts/failures.awk .rig/test.log
inbuild && /^(ok|FAIL|===|---|PASS)/ { inbuild = 0 }
inbuild { print; next }
/^panic: / { inpanic = 1 }
inpanic {
	print
	if ($0 ~ /^(FAIL|ok)[ \t]/) inpanic = 0
	next
}
/^# / { inbuild = 1; print ""; print; next }
/^=== (RUN|CONT|NAME) / { cur = $3; next }
/^=== PAUSE / { next }
/^ *--- FAIL: / {
	print ""
	print "--- FAIL: " $3 " " $4
	printf "%s", out[$3]
	next
}
/^ *--- (PASS|SKIP): / { next }
# A package's verdict ends its tests: names may repeat in the next one.
/^FAIL[ \t]/ { print; split("", out); cur = ""; next }
/^ok[ \t]/ { split("", out); cur = ""; next }
/^(PASS|FAIL)$/ { next }
cur != "" { out[cur] = out[cur] $0 "\n" }
