"""The e-mail channel's services: `inbound` (an e-mail in → its conversation and turn) and
`outbound` (a reply out, threaded)."""
