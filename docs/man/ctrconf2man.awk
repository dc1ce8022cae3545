# ctr.conf(5) from etc/ctr.conf: the file's own comments are the reference. Its first
# comment block is the description; after it each block of comment lines is a paragraph,
# and each "key = value" line that follows it (a key with its default), or a commented
# example of one ("# bind path = /scratch"), is shown as such.
# Usage: awk -v version=V -f ctrconf2man.awk etc/ctr.conf
function esc(s) {
  gsub(/\\/, "\\e", s)
  gsub(/-/, "\\-", s)
  sub(/^[.']/, "\\\\\\&&", s)
  return s
}
function flush() {
  if (para != "") { print ".PP"; print esc(para); para = "" }
}
BEGIN {
  print ".TH CTR.CONF 5 \"\" \"ctr " version "\" \"File Formats\""
  print ".SH NAME"
  print "ctr.conf \\- the administrator's policy for ctr"
  print ".SH SYNOPSIS"
  print ".I PREFIX/etc/ctr/ctr.conf"
  print "(beside ctr; \\fBCTR_CONFIG\\fR names another)"
  print ".SH DESCRIPTION"
  header = 1
}
/^#/ {
  line = $0
  sub(/^# ?/, "", line)
  if (header) { para = para (para == "" ? "" : "\n") line; next }
  if (line ~ /^[a-z][a-z ]*[a-z] = /) { flush(); print ".IP"; print "\\fI# " esc(line) "\\fR"; next }
  if (line ~ /^[A-Z][A-Za-z ]*: +[a-z][a-z ]* = /) { flush(); print ".IP"; print "\\fI# " esc(line) "\\fR"; next }
  para = para (para == "" ? "" : "\n") line
  next
}
/^[ \t]*$/ {
  if (header) { flush(); print ".SH KEYS"; header = 0 }
  else flush()
  next
}
{
  flush()
  split($0, kv, / = ?/)
  print ".TP"
  print "\\fB" esc(kv[1]) "\\fR = " esc(substr($0, length(kv[1]) + 4))
  print ".br"
}
END {
  flush()
  print ".SH SEE ALSO"
  print "\\fBctr\\fR(1); \\fIPREFIX/share/doc/ctr/admin-guide.md\\fR, section 3."
}
