import AgentRuntime
public import ArgumentParser
import Catalog
import EvalEngine
import Foundation
public import Interop
import ModelClients
import TraceCore
import TraceLog

extension ImportFormat: ExpressibleByArgument {}
