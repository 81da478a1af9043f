"""Tools written as Python functions: type hints, defaults and docstrings become the schema, and
a docstring Grammar: section gives a tool its own argument grammar (use --format pythonic)."""
from typing import Literal, Optional


def tool_function(param1: str, param2: str = "value1") -> str:
    r"""
    Tool description for LLM prompting.

    Args:
        param1 (str): Parameter description
        param2 (str, optional): Optional parameter description

    Returns:
        str: Return value description

    Grammar:
        root ::= "param1=" string ( ", param2=" custom-type )?
        custom-type ::= "\"value1\"" | "\"value2\""
    """
    return param1


def get_weather(
    city: str,
    unit: Literal["celsius", "fahrenheit"] = "celsius",
    days: Optional[int] = None,
) -> dict:
    """Current weather and an optional forecast for a city.

    Args:
        city: City name, e.g. "Paris".
        unit: Temperature unit.
        days: Days of forecast; none for today only.
    """
    return {}


@tool
def set_alarm(time: str, *, days: list[Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]] = [], label: str | None = None) -> bool:
    r"""Set an alarm at a time of day.

    Parameters
    ----------
    time : str
        Time of day, 24-hour HH:MM.
    days : list of str, optional
        Weekdays it repeats on; none for once.
    label : str, optional
        Shown when it rings.

    Grammar
    -------
    root ::= "time=\"" hour ":" minute "\"" ( ", days=[" day ( ", " day )* "]" )? ( ", label=" string )?
    hour ::= [01] [0-9] | "2" [0-3]
    minute ::= [0-5] [0-9]
    day ::= "\"" ( "mon" | "tue" | "wed" | "thu" | "fri" | "sat" | "sun" ) "\""
    """
    return True
