"""Writes real Inspect AI eval logs for the import tests, with Inspect itself (`inspect-ai`
from PyPI) and its built-in mock model, so no API key or network is needed.

    python scripts/inspect_logs.py OUT_DIR

One task, two samples, run once as `.eval` and once as `.json`; the `.eval` archive (whose entries
Inspect compresses with zstd) is also repacked with deflate as OUT_DIR/deflate/<name>.eval, the
form older Inspect versions wrote. The model is offered three tools, `add`, `divide` and
`web_search` (never called; its description is long enough for Inspect to move it to the sample's
attachments):
  - "add": the model calls `add` (a real Inspect tool), reads the result and answers;
  - "divide": the model calls `divide` with y = 0, the tool raises ToolError (a tool error in the
    log), and the sample then hits its message limit (a limit in the log).
A second task, as OUT_DIR/cut/<name>.json: the model answers and a solver then adds a user
message that nobody answers (a transcript that ends on a user turn).
"""
import os
import sys

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
import glob
import zipfile

from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import includes
from inspect_ai.model import ChatMessageUser
from inspect_ai.solver import generate, solver, use_tools
from inspect_ai.tool import ToolError, tool

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


@tool
def add():
    async def execute(x: int, y: int):
        """Add two numbers.

        Args:
            x: The first number.
            y: The second number.
        """
        return x + y

    return execute


@tool
def divide():
    async def execute(x: int, y: int):
        """Divide x by y.

        Args:
            x: The dividend.
            y: The divisor.
        """
        if y == 0:
            raise ToolError("division by zero")
        return x / y

    return execute


@tool
def web_search():
    async def execute(query: str):
        """Search the web for pages that match a query and return the title, address and a short extract of each.

        Args:
            query: What to search for.
        """
        return f"no results for {query}"

    return execute


@solver
def ask_again():
    async def solve(state, generate):
        state.messages.append(ChatMessageUser(content="And what is 2 + 2?"))
        return state

    return solve


def outputs():
    # Usage given, so the mock model does not count tokens (which would download a tokenizer).
    items = [
        ModelOutput.for_tool_call(model="mockllm/model", tool_name="add", tool_arguments={"x": 1, "y": 2}),
        ModelOutput.from_content(model="mockllm/model", content="1 + 2 = 3"),
        ModelOutput.for_tool_call(model="mockllm/model", tool_name="divide", tool_arguments={"x": 1, "y": 0}),
        ModelOutput.for_tool_call(model="mockllm/model", tool_name="divide", tool_arguments={"x": 2, "y": 0}),
        ModelOutput.for_tool_call(model="mockllm/model", tool_name="divide", tool_arguments={"x": 3, "y": 0}),
    ]
    for item in items:
        item.usage = ModelUsage(input_tokens=20, output_tokens=5, total_tokens=25)
    return items


for log_format in ("eval", "json"):
    task = Task(
        name="arithmetic",
        dataset=[Sample(id="add", input="What is 1 + 2?", target="3"), Sample(id="divide", input="What is 1 / 0?", target="undefined")],
        solver=[use_tools(add(), divide(), web_search()), generate()],
        scorer=includes(),
        message_limit=6,
    )
    model = get_model("mockllm/model", custom_outputs=outputs())
    logs = eval(task, model=model, log_dir=os.path.join(out, log_format), log_format=log_format, max_samples=1,
                display="none", max_tasks=1)
    if logs[0].status != "success":
        sys.exit(f"inspect_logs: the {log_format} eval ended {logs[0].status}: {logs[0].error}")

cut = Task(name="followup", dataset=[Sample(id="ask", input="What is 1 + 2?", target="3")],
           solver=[use_tools(add()), generate(), ask_again()], scorer=includes())
answer = ModelOutput.from_content(model="mockllm/model", content="1 + 2 = 3")
answer.usage = ModelUsage(input_tokens=20, output_tokens=5, total_tokens=25)
logs = eval(cut, model=get_model("mockllm/model", custom_outputs=[answer]), log_dir=os.path.join(out, "cut"), log_format="json",
            display="none")
if logs[0].status != "success":
    sys.exit(f"inspect_logs: the followup eval ended {logs[0].status}: {logs[0].error}")

os.makedirs(os.path.join(out, "deflate"), exist_ok=True)
for path in glob.glob(os.path.join(out, "eval", "*.eval")):
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(os.path.join(out, "deflate", os.path.basename(path)), "w", zipfile.ZIP_DEFLATED) as target:
        for name in source.namelist():
            target.writestr(name, source.read(name))
