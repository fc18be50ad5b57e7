// Command hello is TestBuild's command: small, so its link is quick.
package main

import "fmt"

func main() { fmt.Println("hello from testbin") }
