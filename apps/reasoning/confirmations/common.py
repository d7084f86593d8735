"""The same in every language: "ok" and the emoji customers answer with."""

ASSENT = (
    "ok",
    "okay",
    "okey",
    "okie",
    "oki",
    "okk",
    "k",
    "kk",
    "oké",
    "okei",
    "👍",
    "👌",
    "✅",
    "✔",
    "☑",
    "🆗",
    "🙆",
)
POLITE = (
    "🙏",
    "😊",
    "🙂",
    "😀",
    "😃",
    "😄",
    "😁",
    "☺",
    "❤",
    "♥",
    "💙",
    "💚",
    "🥰",
    "😍",
    "✨",
    "👏",
)
NO_START = ("👎", "❌", "✖", "🙅")
NEGATIONS = ("👎", "❌", "✖", "🚫", "⛔", "🛑", "🙅")
HEDGES = ("🤔", "😕", "🤷", "😬", "😟", "🧐", "😐")
SARCASM = ("🙄", "😒", "😂", "🤣", "😏", "🤡", "💀")
