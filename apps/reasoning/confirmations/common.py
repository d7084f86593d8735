"""The same in every language: "ok" and the emoji customers answer with."""

YES = (
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
    "💯",
    "🙆",
)
NO_START = ("👎", "❌", "✖", "🙅")
NEGATIONS = ("👎", "❌", "✖", "🚫", "⛔", "🛑", "🙅")
HEDGES = ("🤔", "😕", "🤷", "😬", "😟", "🧐", "😐", "😒")
ECHO = (
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
    "🎉",
    "👏",
    "😉",
)
